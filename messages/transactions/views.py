"""The console's list of open transactions. Reads only; needs a viewer."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from messages.transactions.services import transactions_open
from mqcenter.console import render_page
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole


@console_view(ConsoleRole.VIEWER)
def transaction_list(request: HttpRequest) -> HttpResponse:
    """Transactions still open (prepared, neither committed nor rolled back)."""
    rows = transactions_open(principal=request.console.principal)
    return render_page(request, "messages/transactions.html", {"rows": rows})
