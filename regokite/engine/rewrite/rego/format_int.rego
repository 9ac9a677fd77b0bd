
${name}(a0, a1) := object.get({"-0": "0"}, x, x) if {
	x := format_int(a0, a1)
}
