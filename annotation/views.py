from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def annotator_home(request):
    """Each person's own work page: the studies assigned to them (none until studies exist)."""
    return render(request, "annotation/home.html", {"studies": []})
