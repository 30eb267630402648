"""Griffe extension for the API reference: what a page shows of data is documentation, never initialiser code.

A class's data (fields, attributes set in ``__init__``, properties) is described once, in its docstring's
Attributes section, so the attribute members themselves are not rendered: their source values are initialiser
code (``eta = None if eta is None else ...``). A module constant keeps its value only when it is a plain literal
(``ETA_GRID = (5e-05, ...)``); a value built by code (functions, calls) is left to the constant's docstring.
"""

import ast

import griffe


def _literal(value) -> bool:
    try:
        ast.literal_eval(str(value))
    except (ValueError, SyntaxError, TypeError):
        return False
    return True


class FieldsInDocstring(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        for name, member in list(cls.members.items()):
            if not member.is_alias and member.is_attribute:
                cls.del_member(name)

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs) -> None:
        if attr.value is not None and not _literal(attr.value):
            attr.value = None
