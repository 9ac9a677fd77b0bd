
${name}(a0) := ${string} if {
	is_string(a0)
} else := ${other}
