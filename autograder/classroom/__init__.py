"""Grading a class, outside any one grading: find each student's submission (`discover`), grade
them all in parallel and resumably (`grade_class`) into a SQLite gradebook (`gradebook`), apply
the late policy (`late`), export grades and a class report (`export`), build and run the
Gradescope package (`gradescope`), and join a CPU and a GPU grading of one submission (`merge`).
It builds on `host/` (one grading) and `authoring/` (the schedule, the stubs); nothing imports it
but the command line (`commands`).
"""
