"""``form|reply_fields:n``: reply ``n``'s bound fields in a HALO diagnosis form
(``HaloAnswerForm.reply_fields``), for the item template's loop over the replies."""

from django import template

register = template.Library()


@register.filter
def reply_fields(form, number: int) -> dict:
    return form.reply_fields(int(number))
