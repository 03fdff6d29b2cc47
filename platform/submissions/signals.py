"""What the submissions app announces to the apps built on it, which it does not import."""

from django.dispatch import Signal

# Sent, with `evaluation_ids`, once the transaction that created those queued evaluations has
# committed. The dispatch app publishes them on their hardware's queue.
evaluations_queued = Signal()
