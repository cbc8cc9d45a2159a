"""Course tooling for instructors and authors, outside the sandbox: stubs generated from the
reference's solution markers, weekly releases, the schedule, threshold calibration, broken
variants (`mutants.toml`), mechanical mutation testing and the course invariants."""
