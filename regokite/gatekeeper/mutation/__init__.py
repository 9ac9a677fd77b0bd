"""Gatekeeper's mutators (Assign, AssignMetadata, ModifySet, AssignImage) compiled to Rego.

Each mutator becomes a generated module whose `apply(object, context)` walks
its location as Gatekeeper's mutation function does; one more module applies
them in Gatekeeper's order (by mutator ID) and repeats until the object stops
changing, with Gatekeeper's bound (one iteration more than there are
mutators) and its error when it does not converge. Every engine, and
`regokite test`, `plan` and `check`, evaluates the same Rego the admission
server does.
"""
