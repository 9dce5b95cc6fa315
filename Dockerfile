# An external-grader image for PrairieLearn (or any fleet that runs one container per submission).
#
#   docker build -t crashcourse-grader .
#
# In the question's info.json:
#   "externalGradingOptions": {"enabled": true, "image": "crashcourse-grader", "timeout": 300,
#                              "entrypoint": "crashcourse prairielearn-run --level 2"}
# The container grades /grade/student and writes /grade/results/results.json. It needs no network.
# Without an entrypoint in info.json it grades the level CRASHCOURSE_LEVEL names (2 here).
# bubblewrap boxes the code where the container allows it, and strace takes the kernel's account of
# its file operations where ptrace is allowed; results.json says which of them held. From an
# installed kit (a wheel, no checkout), `crashcourse prairielearn-image DIR --level 2` writes the
# same image's Dockerfile with the kit beside it.

FROM python:3.12-slim AS wheel
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.12-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap strace \
    && rm -rf /var/lib/apt/lists/*
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install --no-cache-dir /tmp/dist/*.whl && rm -rf /tmp/dist
ENV CRASHCOURSE_LEVEL=2
CMD ["crashcourse", "prairielearn-run"]
