
${name}(a, b) := x if {
	is_number(a)
	is_number(b)
	round(a) == a
	round(b) == b
	abs(a) < 9007199254740992
	abs(b) < 9007199254740992
	${checks}
} else := a ${sign} b if {
	not is_number(a)
} else := ${arith}("${sign}", json.marshal(a), json.marshal(b))
