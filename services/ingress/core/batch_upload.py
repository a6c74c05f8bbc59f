"""A `POST /v1/files` multipart/form-data body, parsed as it arrives (pure: no I/O of its own).

`MultipartUpload` is fed the body in pieces (python-multipart's push parser). The `file` part's
bytes go straight to the given binary file, and through `LineChecker`, so every line is
validated as it completes; nothing is buffered but one partial line and the parser's few bytes
of lookbehind. Rules, each an OpenAI-shaped APIError the moment it is broken:
- the body is multipart/form-data with a boundary; at most `_MAX_PARTS` parts, exactly one of
  them the `file` part (with a filename); `purpose` and other small fields at most
  `_MAX_FIELD_BYTES` each (400, naming the field);
- the file part passes `max_file_bytes`: 413 at that byte; the whole body passes
  `max_file_bytes` + `ENVELOPE_BYTES` (part headers and fields): 413;
- a bad line: 400 naming the line and the field (`LineChecker`); `purpose` must be "batch".
"""

from __future__ import annotations

from typing import BinaryIO

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from services.ingress.core.batch_errors import too_large
from services.ingress.core.batch_files import BatchConfig, LineChecker
from services.ingress.core.errors import bad_request

ENVELOPE_BYTES = 64 * 1024
"""Body bytes allowed beyond `max_file_bytes`: boundaries, part headers, small fields."""
_MAX_PARTS = 8
_MAX_FIELD_BYTES = 1024


class MultipartUpload:
    """The parts of one upload body, fed with `feed` and closed with `finish`."""

    def __init__(self, content_type: str | None, out: BinaryIO, config: BatchConfig) -> None:
        kind, params = parse_options_header(content_type or "")
        boundary = params.get(b"boundary")
        if kind != b"multipart/form-data" or not boundary:
            raise bad_request(
                "file", "the body must be multipart/form-data with a boundary (a `file` part)"
            )
        self.config = config
        self.out = out
        self.received = 0
        """Body bytes fed so far."""
        self.file_bytes = 0
        """Bytes of the file part so far."""
        self.filename: str | None = None
        self.fields: dict[str, str] = {}
        self.checker = LineChecker(config)
        self._parts = 0
        self._name: str | None = None
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._field = bytearray()
        self._ended = False
        try:
            self._parser = MultipartParser(
                boundary,
                {
                    "on_part_begin": self._part_begin,
                    "on_header_field": self._header_field_data,
                    "on_header_value": self._header_value_data,
                    "on_header_end": self._header_end,
                    "on_headers_finished": self._headers_finished,
                    "on_part_data": self._part_data,
                    "on_part_end": self._part_end,
                    "on_end": self._end,
                },
            )
        except Exception as err:  # a boundary over the parser's limit
            raise bad_request("file", f"bad multipart boundary: {err}") from None

    @property
    def purpose(self) -> str | None:
        return self.fields.get("purpose")

    def feed(self, data: bytes) -> None:
        self.received += len(data)
        if self.received > self.config.max_file_bytes + ENVELOPE_BYTES:
            raise too_large(
                "the upload body",
                self.config.max_file_bytes + ENVELOPE_BYTES,
                "batch.max_file_bytes + 64 KiB of multipart envelope",
            )
        try:
            self._parser.write(data)
        except MultipartParseError as err:
            raise bad_request("file", f"malformed multipart body: {err}") from None

    def finish(self) -> None:
        """The body ended: the parts must be complete, the file present and valid."""
        if not self._ended:
            raise bad_request("file", "the multipart body ended before its closing boundary")
        if self.filename is None:
            raise bad_request("file", "is required: a JSONL file part")
        if self.purpose != "batch":
            raise bad_request(
                "purpose", f"must be 'batch' (the only one served), got {self.purpose!r}"
            )
        for _ in self.checker.finish():
            pass

    # parser callbacks ----------------------------------------------------------------------

    def _part_begin(self) -> None:
        self._parts += 1
        if self._parts > _MAX_PARTS:
            raise bad_request(None, f"the body has more than {_MAX_PARTS} multipart parts")
        self._name = None
        self._headers = {}
        self._field = bytearray()

    def _header_field_data(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        self._headers[bytes(self._header_field).lower()] = bytes(self._header_value)
        self._header_field = bytearray()
        self._header_value = bytearray()

    def _headers_finished(self) -> None:
        _, params = parse_options_header(self._headers.get(b"content-disposition", b""))
        name = params.get(b"name", b"").decode("utf-8", "replace")
        if not name:
            raise bad_request(None, "a multipart part has no name (Content-Disposition)")
        if name == "file":
            if self.filename is not None:
                raise bad_request("file", "only one file part is accepted")
            filename = params.get(b"filename", b"batch.jsonl").decode("utf-8", "replace")
            self.filename = filename[:256] or "batch.jsonl"
        elif name in self.fields:
            raise bad_request(name, "is given twice")
        self._name = name

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        piece = data[start:end]
        if self._name != "file":
            self._field += piece
            if len(self._field) > _MAX_FIELD_BYTES:
                raise bad_request(self._name, f"is longer than {_MAX_FIELD_BYTES} bytes")
            return
        self.file_bytes += len(piece)
        if self.file_bytes > self.config.max_file_bytes:
            raise too_large("file", self.config.max_file_bytes, "batch.max_file_bytes", "file")
        self.out.write(piece)
        for _ in self.checker.feed(piece):
            pass

    def _part_end(self) -> None:
        if self._name is not None and self._name != "file":
            self.fields[self._name] = self._field.decode("utf-8", "replace")
            if self._name == "purpose" and self.purpose != "batch":
                raise bad_request(
                    "purpose", f"must be 'batch' (the only one served), got {self.purpose!r}"
                )

    def _end(self) -> None:
        self._ended = True
