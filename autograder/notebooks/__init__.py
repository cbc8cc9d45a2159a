"""The notebook track: exercises authored as nbgrader source notebooks, released with nbgrader's
generate_assignment, and graded by the course's own pipeline (judge and worker), never by
nbgrader's autograde, which would run the tests inside the student's kernel.

cells.py reads a notebook's nbgrader cells, extract.py turns them into a package and written
answers, exercise.py says where an exercise lives, release.py runs nbgrader, grade.py grades,
record.py writes a grading into the class gradebook, commands.py is the command line."""
