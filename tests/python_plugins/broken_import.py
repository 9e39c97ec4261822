"""A module that fails to import: the run stops (exit 2) quoting the traceback's last lines."""

import opcts


def build_table():
    return {"e4m3fn": no_such_name}  # noqa: F821  NameError at import time


TABLE = build_table()


@opcts.impl("cast", name="pybroken.cast", backend="host")
def cast(p, t, ctx):
    pass
