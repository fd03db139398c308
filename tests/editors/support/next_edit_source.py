"""The file every editor's next-edit test renames in: uses above and below a definition."""

ACCEPT = "github.copilot.didAcceptNextEditSuggestionItem"
"""The accept command the server lists while ``nextEdit`` is on (Copilot's name)."""

# `area` is used on line 2 (above its definition), defined on line 5, called on 10, 13.
SHAPES = """def main():
    print(area(2, 3))


def area(width, height, depth):
    return width * height


def total(shapes):
    return sum(area(w, h, 1) for w, h in shapes)


print(area(2, 3, 4))
"""
