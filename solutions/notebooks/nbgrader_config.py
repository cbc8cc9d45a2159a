# nbgrader's configuration for `autograder notebooks release`: it runs generate_assignment in a
# temporary nbgrader course folder (source/<name>/<name>.ipynb) that holds a copy of this file.
c = get_config()  # noqa: F821 (nbgrader defines it when it reads this file)

# The bookkeeping database lives and dies with that temporary folder: grading never reads it.
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# What a cleared solution region becomes. autograder/notebooks/cells.py reads an answer cell still
# holding TEXT_STUB as unanswered: keep the two equal.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
