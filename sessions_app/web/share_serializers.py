"""Input and output of the share links' API (docs/design.md §24)."""

from rest_framework import serializers

from sessions_app.services.shares import SHARE_EXPIRY_DAYS_MAX
from sessions_app.web.serializers import JsonBooleanField


class ShareCreateInput(serializers.Serializer):
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=SHARE_EXPIRY_DAYS_MAX,
        help_text="the link stops working after this many days (default: never)",
    )
    include_tools = JsonBooleanField(
        required=False, default=False, help_text="also show tool calls and their results"
    )


class ShareOutput(serializers.Serializer):
    id = serializers.IntegerField()
    upto_seq = serializers.IntegerField(help_text="the link shows entries up to this seq")
    include_tools = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)


class ShareCreatedOutput(ShareOutput):
    url = serializers.CharField(help_text="/s/<token>: shown once, never again")


class SharedAttachmentOutput(serializers.Serializer):
    id = serializers.CharField(help_text="read it at /api/shared/<token>/files/<id>/")
    name = serializers.CharField()
    mime = serializers.CharField()
    size = serializers.IntegerField()
    width = serializers.IntegerField(required=False, help_text="images only")
    height = serializers.IntegerField(required=False, help_text="images only")


class SharedEntryDataOutput(serializers.Serializer):
    attachments = SharedAttachmentOutput(many=True)


class SharedEntryOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "assistant", "tool"])
    content = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    data = SharedEntryDataOutput(
        required=False, help_text="a user message's attached files (only when it has any)"
    )
    tool_calls = serializers.ListField(
        child=serializers.DictField(), allow_null=True, required=False
    )
    tool_call_id = serializers.CharField(allow_blank=True, required=False)
    name = serializers.CharField(allow_blank=True, required=False)
    is_error = serializers.BooleanField(required=False)


class SharedOutput(serializers.Serializer):
    title = serializers.CharField(allow_blank=True)
    upto_seq = serializers.IntegerField()
    include_tools = serializers.BooleanField()
    shared_at = serializers.DateTimeField()
    entries = SharedEntryOutput(many=True)
