"""A server written with the official Python MCP SDK (FastMCP), as its examples are: one tool
whose typed parameters become an input schema that constrains them (a `Literal` is an `enum`,
a `Field` bound a `minimum` and `maximum`, a length a `maxLength`, an optional value an
`anyOf` with `null`). `stdio` or `http PORT` (streamable HTTP on 127.0.0.1:PORT, path /mcp)
is the transport. It logs each call's arguments to $MCP_LOG."""

import json
import os
import sys
from typing import Annotated, Literal

from mcp.server.fastmcp import FastMCP
from pydantic import Field

transport = sys.argv[1]
port = int(sys.argv[2]) if transport == "http" else 8000
server = FastMCP("paints", host="127.0.0.1", port=port, log_level="WARNING")


@server.tool()
def paint(
    wall: Annotated[str, Field(max_length=20, description="which wall")],
    color: Literal["red", "green", "blue"],
    coats: Annotated[int, Field(ge=1, le=3)] = 1,
    finish: Literal["matte", "gloss"] | None = None,
) -> str:
    """Paints a wall with one of three colors."""
    with open(os.environ["MCP_LOG"], "a") as f:
        f.write(json.dumps({"wall": wall, "color": color, "coats": coats, "finish": finish}) + "\n")
    return f"painted the {wall} {color}, {coats} coat(s), {finish or 'no'} finish"


server.run(transport="streamable-http" if transport == "http" else "stdio")
