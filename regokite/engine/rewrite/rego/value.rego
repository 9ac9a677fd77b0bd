
${name}(${operands}) := x if {
	x := ${value}
}
