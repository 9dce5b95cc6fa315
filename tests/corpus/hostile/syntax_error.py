# A submission that does not parse: a missing closing bracket.
import json

def save_checkpoint(state, directory="checkpoints":
    pass
