from django.urls import path

from casestudies import views

urlpatterns = [
    path("", views.case_studies, name="case-studies"),
    path("<slug:slug>/", views.case_study, name="case-study"),
]
