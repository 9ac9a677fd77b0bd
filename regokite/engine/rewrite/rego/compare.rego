
${name}(a, b) := ${first}(a) if {
	__rk_swapped_${tag}(a, b)
} else := ${unordered}("${sign}") if {
	__rk_deep_${tag}(a, b)
} else := a ${sign} b
