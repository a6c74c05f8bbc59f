"""Tenants and bands in the scheduler: strict criticality bands, token-weighted fairness (VTC)
between the tenants of a band, and shedding of sheddable work (services/scheduler/README.md,
"Tenants, bands and fairness")."""
