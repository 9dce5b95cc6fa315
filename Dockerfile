# An external-grader image for PrairieLearn (or any fleet that runs one container per submission).
#
#   docker build -t crashcourse-grader .
#
# In the question's info.json:
#   "externalGradingOptions": {"enabled": true, "image": "crashcourse-grader", "timeout": 300,
#                              "entrypoint": "crashcourse prairielearn-run --level 2"}
# The container grades /grade/student and writes /grade/results/results.json. It needs no network.
# Without an entrypoint in info.json it grades the level CRASHCOURSE_LEVEL names (2 here).

FROM python:3.12-slim AS wheel
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.12-slim
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install --no-cache-dir /tmp/dist/*.whl && rm -rf /tmp/dist
ENV CRASHCOURSE_LEVEL=2
CMD ["crashcourse", "prairielearn-run"]
