"""What a measured figure means, below every layer that shows or records one: how sure it is
(`uncertainty`: intervals and paired differences), the clinician's operating point
(`operating_point`), and how far an agent's claimed metric may sit from the measured one
(`claims`). Pure functions of numbers and text; numpy is their one dependency."""
