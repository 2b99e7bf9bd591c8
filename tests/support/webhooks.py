"""GitHub's own example payloads, as the server tests feed them in."""

from tests.fakes.webhook_examples import example


def labeled(label="agent"):
    return example("issues", "labeled", sender_type="User", label__name=label)
