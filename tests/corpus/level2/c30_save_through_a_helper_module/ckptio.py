"""The learner's own helper: an all-or-nothing write of one JSON file."""

import json
import os


def write_json_atomically(obj, path):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)
