"""Batch formation for static-batching engines (SCLS DP batching, UELLM SLO-ODBS, FIFO)."""
