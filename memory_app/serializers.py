"""The shapes of memory_app's HTTP API (docs/api.md, "Procedures"): input apart from output."""

from rest_framework import serializers

from memory_app.models import Procedure

DECISIONS = [Procedure.Status.APPROVED.value, Procedure.Status.REJECTED.value]


class ProcedureDecisionInput(serializers.Serializer):
    # PATCH: a body without it changes nothing (as a goal's).
    status = serializers.ChoiceField(
        choices=DECISIONS,
        required=False,
        error_messages={"invalid_choice": 'status is "approved" or "rejected", not "{input}"'},
    )


class ProcedureOutput(serializers.Serializer):
    id = serializers.IntegerField()
    task_kind = serializers.CharField()
    title = serializers.CharField()
    steps = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=[choice for choice, _ in Procedure.Status.choices])
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class ProceduresOutput(serializers.Serializer):
    procedures = ProcedureOutput(many=True)
