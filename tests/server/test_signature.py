import pytest

from bot.server.signature import InvalidSignature, sign, validate

# The example from GitHub's docs: https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
DOC_SECRET = "It's a Secret to Everybody"
DOC_BODY = b"Hello, World!"
DOC_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_githubs_documented_example_validates():
    assert sign(DOC_BODY, DOC_SECRET) == DOC_SIGNATURE
    validate(DOC_BODY, signature=DOC_SIGNATURE, secret=DOC_SECRET)


@pytest.mark.parametrize("signature, hint", [
    (None, "no X-Hub-Signature-256"),
    ("", "no X-Hub-Signature-256"),
    ("sha256=" + "0" * 64, "check GITHUB_WEBHOOK_SECRET"),
    ("sha1=abc", "check GITHUB_WEBHOOK_SECRET"),
])
def test_bad_signatures_say_what_to_check(signature, hint):
    with pytest.raises(InvalidSignature, match=hint):
        validate(DOC_BODY, signature=signature, secret=DOC_SECRET)


def test_a_changed_body_fails():
    with pytest.raises(InvalidSignature):
        validate(DOC_BODY + b" ", signature=DOC_SIGNATURE, secret=DOC_SECRET)
