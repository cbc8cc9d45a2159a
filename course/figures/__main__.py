"""`python -m course.figures [NAME ...] [--out DIR]`: rebuild the figures."""

from course.figures.build import main

raise SystemExit(main())
