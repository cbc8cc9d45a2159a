"""Outside the sandbox (trusted): the grading pipeline over plain dataclasses.

spec (assignment.toml) -> stage (a fresh work dir of master tests and the submission's files) ->
probe (import the package once) -> the sandbox backends (autograder/sandbox/) run the judge ->
collect (the signed records, reconciled with the expected tests) -> score -> report. `grade` ties
them together; `repo` finds the course; `course_files` is the one rule for which files count.
Nothing here runs student code.
"""
