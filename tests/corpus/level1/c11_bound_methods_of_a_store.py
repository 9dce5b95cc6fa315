"""VERDICT: pass

The two functions are bound methods of one module-level store object (`save_checkpoint = _STORE.save`),
which keeps the file's name and the field list as attributes. The save writes through
tempfile.mkstemp in the folder and os.write; the loader catches AttributeError and TypeError from
a file that is not an object and turns them into CheckpointError.
"""

import json
import os
import tempfile


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


class _Store:
    name = "checkpoint.json"
    fields = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")

    def save(self, state, directory="checkpoints"):
        os.makedirs(directory, exist_ok=True)
        data = json.dumps({k: state[k] for k in self.fields}, ensure_ascii=False).encode("utf-8")
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".ckpt-")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, os.path.join(directory, self.name))

    def load(self, directory="checkpoints"):
        path = os.path.join(directory, self.name)
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: {exc}") from exc
        try:
            version = data["version"] if "version" in data.keys() else None
        except (AttributeError, TypeError):
            raise CheckpointError(f"{path} is not a JSON object") from None
        if version.__class__ is not int or version != 1:
            raise UnsupportedVersion(f"{path}: version {version!r}")
        missing = [k for k in self.fields if k not in data]
        if missing:
            raise CheckpointError(f"{path} lacks {missing}")
        return data


_STORE = _Store()
save_checkpoint = _STORE.save
load_checkpoint = _STORE.load
