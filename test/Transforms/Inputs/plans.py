"""Reading plans (rlhfc --emit=plan JSON) in the .check.py scripts."""
import json


def load(path):
    """The first algorithm's plan."""
    return json.load(open(path))[0]


def gpus(plan, name):
    """The GPUs of the call `name` (e.g. "generate @actor"), as a set."""
    mesh = next(c["mesh"] for c in plan["calls"] if c["name"] == name)
    return set(range(mesh["first_gpu"], mesh["first_gpu"] + mesh["gpus"]))
