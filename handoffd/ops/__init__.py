"""The table of operations: each operation declared once (`table`), its context, its
function and its result; every adapter is made from it (`handoffd.adapters`)."""
