"""What the judge and the worker share: message kinds, the wire format and the tensor arena.

The judge (pytest, the test bodies, the oracles, the verdict) never imports the student's package;
the worker (a separate process) imports it and runs it. They speak over one socket pair: frames
of pickled *builtins only* (the judge's unpickler resolves no global, so a frame can build lists,
dicts, tuples, strings and numbers, never an object of the worker's choosing), with tensor bytes
in a shared-memory arena beside the socket. This package imports nothing from the rest of the
grader: both sides may import it.
"""
