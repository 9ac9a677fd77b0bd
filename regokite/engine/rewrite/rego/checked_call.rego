
${name}(${operands}) := ${value} if {
	${check}
}
