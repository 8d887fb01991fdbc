"""HTML as the text a reader sees, by the standard library's HTML parser (no regexes): tags
dropped, scripts and styles left out, block elements on lines of their own, the page's <title>
kept (its first one outside inline SVG and MathML, whose <title> names an icon or a formula)."""

from __future__ import annotations

from html.parser import HTMLParser

# Elements whose content is not text a reader sees.
HIDDEN_ELEMENTS = frozenset({"script", "style", "template", "noscript", "svg"})
# Elements of another vocabulary embedded in a page: a <title> inside is not the page's.
FOREIGN_ELEMENTS = frozenset({"svg", "math"})
# Elements that start a new line in a browser.
BLOCK_ELEMENTS = frozenset(
    {
        "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "pre", "section",
        "article", "header", "footer", "nav", "aside", "blockquote", "hr", "h1", "h2", "h3",
        "h4", "h5", "h6", "title", "body", "main", "figure", "figcaption", "form",
    }
)  # fmt: skip


class _Reader(HTMLParser):
    """Collects the visible text and the <title> of a page as it is fed."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = [""]
        self.title = ""
        self.hidden = 0
        self.foreign = 0
        self.in_title = False
        self.title_closed = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Enter an element: a block starts a line, a hidden one hides what follows."""
        self._element(tag, 1)

    def handle_endtag(self, tag: str) -> None:
        """Leave an element."""
        self._element(tag, -1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """A self-closing tag (``<br/>``) only breaks the line."""
        if tag in BLOCK_ELEMENTS:
            self.lines.append("")

    def _element(self, tag: str, step: int) -> None:
        """Track the title and hidden elements; a block boundary starts a new line."""
        if tag in FOREIGN_ELEMENTS:
            self.foreign = max(0, self.foreign + step)
        if tag == "title" and not self.foreign:
            self.title_closed = self.title_closed or (self.in_title and step < 0)
            self.in_title = step > 0
        elif tag in HIDDEN_ELEMENTS:
            self.hidden = max(0, self.hidden + step)
        if tag in BLOCK_ELEMENTS:
            self.lines.append("")

    def handle_data(self, data: str) -> None:
        """Text: the first title's goes to the title (a browser shows no later one), visible
        text to the current line."""
        if self.in_title:
            if not self.title_closed:
                self.title += data
        elif not self.hidden:
            self.lines[-1] += data


def html_text(markup: str) -> tuple[str, str]:
    """(title, visible text) of an HTML page; lines of whitespace only are dropped."""
    reader = _Reader()
    reader.feed(markup)
    reader.close()
    lines = (" ".join(line.split()) for line in reader.lines)
    return " ".join(reader.title.split()), "\n".join(line for line in lines if line)


def html_title(markup: str) -> str:
    """The page's <title> words, or ""."""
    return html_text(markup)[0]
