"""The API's body parsers: DRF's, plus the input guard of `infrastructure.inputs`."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from .inputs import check_input


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            # json's C scanner recurses once per nesting level.
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        check_input(data)
        return data
