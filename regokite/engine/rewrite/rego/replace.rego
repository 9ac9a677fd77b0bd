
${name}(a0, a1, a2) := replace(a0, a1, a2) if {
	a1 != ""
} else := ${replace_empty}(a0, a2)
