"""What Chiezo does, once for every surface: the request models and the operation registry,
the context the handlers share, notes, browsing, the tools agents call, jobs and the
operator's work (maintenance, transfer, doctor, evaluation)."""
