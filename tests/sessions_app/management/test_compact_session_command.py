"""`manage.py compact_session`: compacts a session now and says what the model will see."""

import pytest
from django.core.management import CommandError, call_command

from tests.sessions_app.services.test_compaction import three_turns

pytestmark = pytest.mark.django_db


def test_the_command_compacts_and_reports(capsys):
    three_turns("s-cmd")
    call_command("compact_session", "s-cmd")
    out = capsys.readouterr().out
    assert "compacted s-cmd" in out
    assert "My name is Mia" in out
    with pytest.raises(CommandError, match="nothing to compact"):
        call_command("compact_session", "s-cmd")
    with pytest.raises(CommandError, match="no session"):
        call_command("compact_session", "s-nope")
