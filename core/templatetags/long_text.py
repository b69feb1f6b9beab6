"""``{% long_text text %}``: the name ``{% markdown text %}`` (core/templatetags/markdown.py)
had before texts were rendered as Markdown (issue #19). Item templates written against it
render Markdown with the raw switch too; new templates use ``{% markdown %}``."""

from django import template

from core.templatetags.markdown import markdown

register = template.Library()
register.simple_tag(markdown, name="long_text")
