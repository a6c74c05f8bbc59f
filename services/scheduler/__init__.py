"""Scheduler service: routing and global queue policies (pure cores) and, later, its deployment."""
