# A submission that fails while it is being imported.
import json

raise RuntimeError("configuration file not found")
