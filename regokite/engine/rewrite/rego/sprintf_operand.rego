
${name}(__rk0__) := __rk0__ if {
	is_string(__rk0__)
} else := __rk0__ if {
	is_number(__rk0__)
} else := __rk5__ if {
	__rk5__ := ${written}
}
