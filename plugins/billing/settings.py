"""Billing's settings (``register_settings``) and the seed invoices a new account opens with.

``FRONTDESK_BILLING_<FIELD>`` variables, ``.env`` or the profile's ``[plugins.billing]`` table:

- ``sandbox_seconds`` (default 0): how long the built-in sandbox gateway takes per charge. A card
  network's round trip is a few hundred ms; giving the sandbox that shape lets a demo show a
  payment refusing to be interrupted.
- ``payee`` (default "the front desk"): who the caller pays, read back before a payment is
  confirmed, for invoices that do not name their own payee.
- ``reconcile_seconds`` (default 30): how often each runner settles payments left pending
  (the gateway moved money, or may have, and the ledger did not hear back): by the key, the
  gateway's ``find`` says whether money moved (recorded as paid) or not (the reservation is
  released), and the caller hears the outcome as a follow-up. Also once when a runner starts.
- ``reconcile_grace_seconds`` (default 30): how old, by the database's clock, a pending
  payment must be before a runner settles it, so a payment in a live call is never raced
  (one whose call is still running is never settled, whatever its age).
- ``seed_invoices`` (default none): a TOML or JSON file of invoices every new account opens
  with, for a sandbox or a demo. A relative path is taken from the folder of the profile
  ``FRONTDESK_PROFILE`` names, else the working directory. Without it a new account starts
  empty. The file::

      payee = "Bayside Dental"          # optional: the payee of the invoices below

      [[invoices]]
      description = "Check-up and cleaning"
      amount = "120.00"                 # a string keeps the cents exact
      due_days = 14                     # due this many days after the account opens
      payee = "Bayside Dental"          # optional, per invoice
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from frontdesk.core import ToolError

from .money import parse_amount

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_PAYEE = "the front desk"


def _exact(raw: Any) -> Decimal:
    try:
        return parse_amount(raw)
    except ToolError as exc:
        raise ValueError(str(exc)) from None


class _SeedInvoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1, max_length=500)
    amount: Annotated[Decimal, BeforeValidator(_exact)]
    due_days: int = Field(ge=0, le=3650)
    payee: str | None = Field(None, min_length=1, max_length=200)


class _SeedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payee: str | None = Field(None, min_length=1, max_length=200)
    invoices: list[_SeedInvoice] = []


@dataclass(frozen=True)
class SeedInvoice:
    """One invoice a new account opens with. ``payee`` None means billing's ``payee``."""

    description: str
    amount: Decimal
    due_days: int
    payee: str | None = None


def load_seed(path: Path) -> tuple[SeedInvoice, ...]:
    """The invoices in a seed file, or ``ValueError`` naming what is wrong in one line."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ValueError(f"cannot read seed invoices {path}: {exc.strerror or exc}") from None
    return _load(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load(path: Path, mtime_ns: int, size: int) -> tuple[SeedInvoice, ...]:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise ValueError(f"cannot read seed invoices {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise ValueError(
            f"{path} is not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}"
        ) from None
    try:
        seed = _SeedFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "file"
        raise ValueError(f"{path}: {where}: {first.get('msg', 'invalid value')}") from None
    return tuple(
        SeedInvoice(i.description, i.amount, i.due_days, i.payee or seed.payee)
        for i in seed.invoices
    )


class BillingSettings(BaseSettings):
    """The billing desk's settings: ``FRONTDESK_BILLING_*`` or the profile's
    ``[plugins.billing]`` (see this module's docstring)."""

    model_config = SettingsConfigDict(env_prefix="FRONTDESK_BILLING_", extra="ignore")

    sandbox_seconds: float = Field(0.0, ge=0, le=60)
    payee: str = Field(DEFAULT_PAYEE, min_length=1, max_length=200)
    seed_invoices: Path | None = None
    reconcile_seconds: float = Field(30.0, ge=0.05, le=3600)
    reconcile_grace_seconds: float = Field(30.0, ge=0, le=86400)

    @field_validator("seed_invoices", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("seed_invoices")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        # Checked at start-up, so a bad file is one line from doctor, not a failed call later.
        if value is None:
            return None
        path = value.expanduser()
        # A relative path in the profile was made relative to the profile by frontdesk; one
        # from the environment is relative to the working directory, as for every plugin.
        path = path.resolve()
        load_seed(path)
        return path

    def seeds(self) -> tuple[SeedInvoice, ...]:
        """The invoices a new account opens with (none without ``seed_invoices``)."""
        return load_seed(self.seed_invoices) if self.seed_invoices is not None else ()
