"""SCORPIO policy core: TRP, credit-based batching, VBS admission and the TTFT guard."""
