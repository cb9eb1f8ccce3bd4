"""The TDSet operator: a Deployment whose replica count follows a time-of-day schedule."""
