"""Deploying a sweep's answer: what each host gets (choice), whether it passed (gate), what runs
where (store)."""
