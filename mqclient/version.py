"""The SDK version, in its own module so every other module can import it without cycles."""

from __future__ import annotations

__version__ = "0.1.0"
