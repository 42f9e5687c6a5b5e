"""The real URL configuration plus two routes that forgot their permission checks, to prove
the generated authorization matrix catches such a route (see test_authz_matrix)."""

from __future__ import annotations

from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from mqcenter.core.auth import HasToken
from mqcenter.urls import urlpatterns as real_urlpatterns


class OpenView(APIView):
    authentication_classes = []
    permission_classes = [AllowAny]

    def get(self, request):  # type: ignore[no-untyped-def]
        return Response({"secret": "SHOPSECRET"})


class AnyTokenView(APIView):
    permission_classes = [HasToken]  # a token, but no scope check

    def post(self, request):  # type: ignore[no-untyped-def]
        return Response({"ok": True})


urlpatterns = [
    path("api/v1/leaky-open", OpenView.as_view(), name="leaky-open"),
    path("api/v1/leaky-any-token", AnyTokenView.as_view(), name="leaky-any-token"),
    *real_urlpatterns,
]
