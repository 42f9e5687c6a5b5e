"""WSGI entry point (for WSGI servers; long-polls and WebSockets want the ASGI one)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")

application = get_wsgi_application()
